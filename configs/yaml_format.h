// YAML text for the resolved job and the reference doc: values written so that our loader, and
// other YAML readers, read them back exactly.
#pragma once

#include <string>

#include "configs/schema.h"

namespace rm {

// The YAML text of a field's value, as to_yaml() writes it: scalars plain when that is
// unambiguous and double-quoted otherwise; lists as [a, b]; maps as {K: v}; floats in the
// shortest form that reads back to the same double.
std::string yaml_text(const FieldRef& field);

// `s` as a YAML scalar: plain if it cannot be read as anything but this string (by yaml-cpp or
// by a YAML 1.1 reader such as PyYAML: no "yes", "1e3", "24:00:00" left plain), else quoted.
std::string yaml_quote(const std::string& s);

// The shortest decimal text that reads back to exactly `v`: "0.002", "300", "1.0e-8", "1.5e+300"
// (an exponent form always has a '.' and a sign, so YAML 1.1 readers see a float too).
std::string format_double(double v);

}  // namespace rm
