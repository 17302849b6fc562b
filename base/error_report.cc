#include "base/error_report.h"

#include <cstdio>

#include "base/exit_codes.h"
#include "base/input_error.h"
#include "configs/job_loader.h"
#include "io/atomic_file.h"

namespace rm {

namespace {
std::string g_error_prefix;
}  // namespace

void set_error_prefix(const std::string& prefix) { g_error_prefix = prefix; }

void print_error(const std::string& message) {
  std::fprintf(stderr, "ringmaster: %s%s\n", g_error_prefix.c_str(), message.c_str());
}

int report_errors(const std::function<int()>& body) {
  try {
    return body();
  } catch (const JobConfigError& e) {
    for (const ConfigError& err : e.errors) std::fprintf(stderr, "%s\n", err.str().c_str());
    print_error(std::to_string(e.errors.size()) + (e.errors.size() == 1 ? " error" : " errors") +
                " in " + e.subject);
    return kExitBadInput;
  } catch (const InputError& e) {  // bad data, a device that is not there, ...
    print_error(e.what());
    return kExitBadInput;
  } catch (const IoError& e) {
    print_error(e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    print_error(e.what());
    return kExitFailure;
  }
}

}  // namespace rm
