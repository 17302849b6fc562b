// The HTML page of `ringmaster report` around its plots: the runs' facts side by side, their
// resolved jobs, the plots (report_svg.h) and the events table. Everything taken from a run's
// files is HTML-escaped here. Stable names for tests: <table class="facts">,
// <pre class="config" data-run="...">, <table class="events"> with one
// <tr class="event event-KIND" data-run="..."> per event shown.
#pragma once

#include <string>
#include <vector>

#include "launcher/report_data.h"

namespace rm::report {

// The whole document: runs as read (labels unique), plots as rendered SVG elements.
std::string report_page(const std::vector<RunData>& runs, const std::vector<std::string>& plots);

}  // namespace rm::report
