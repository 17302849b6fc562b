#include "base/elapsed.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace rm {

double process_age_s() {
  std::ifstream stat_file("/proc/self/stat");
  std::string stat;
  std::getline(stat_file, stat);
  // Field 2 (the command) is in parentheses and may hold spaces: count fields after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  // After ')': field 3 (state) is the first; field 22 (starttime) is the 20th.
  for (int i = 0; i < 20; ++i) {
    if (!(fields >> field)) return -1;
  }
  double uptime = 0;
  if (!(std::ifstream("/proc/uptime") >> uptime)) return -1;
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (ticks <= 0) return -1;
  return uptime - std::stod(field) / static_cast<double>(ticks);
}

}  // namespace rm
