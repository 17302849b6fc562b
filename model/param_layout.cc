#include "model/param_layout.h"

#include <stdexcept>

namespace rm {

size_t ParamLayout::add(const std::string& name, std::vector<int64_t> shape, bool decay) {
  for (const auto& t : tensors_) {
    if (t.name == name) throw std::logic_error("ParamLayout: duplicate tensor " + name);
  }
  size_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) throw std::logic_error("ParamLayout: non-positive dimension in " + name);
    n *= static_cast<size_t>(d);
  }
  tensors_.push_back({name, std::move(shape), size_, n, decay});
  size_ += n;
  return tensors_.back().offset;
}

}  // namespace rm
