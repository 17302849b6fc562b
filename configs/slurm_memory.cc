#include "configs/slurm_memory.h"

#include <cctype>
#include <regex>

namespace rm {

double parse_slurm_memory(const std::string& text) {
  static const std::regex re(R"(([0-9]{1,15})([KMGTkmgt]?))");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return -1;
  double bytes = std::stod(m[1].str());
  const char unit = m[2].length() > 0 ? static_cast<char>(std::toupper(m[2].str()[0])) : 'M';
  for (const char u : {'K', 'M', 'G', 'T'}) {
    bytes *= 1024;
    if (u == unit) break;
  }
  return bytes;
}

}  // namespace rm
