// How every command and every rank reports a failure to the user: one message on stderr, and the
// exit code (exit_codes.h) that says what kind of failure it was.
#pragma once

#include <functional>
#include <string>

namespace rm {

// Runs a command body and maps what escapes it to one message and an exit code:
// job-file errors (all of them, one per line), file errors (IoError) and every InputError
// (base/input_error.h: bad data, hardware the job asks for and the node lacks) -> kExitBadInput;
// anything else -> kExitFailure.
int report_errors(const std::function<int()>& body);

// Prints an error for the user: "ringmaster: <prefix><message>" on stderr.
void print_error(const std::string& message);
// Set once per process, e.g. "[rank 3] " in a multi-rank job.
void set_error_prefix(const std::string& prefix);

}  // namespace rm
