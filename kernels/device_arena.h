// One allocation of a Compute carved into typed arrays: plan every array (any element type),
// then allocate once; each planned pointer is then set to its slice. Every slice starts on a
// 256-byte boundary (what cuBLAS and vector loads like). Used for activations and scratch,
// which are planned once at construction so that nothing on the step path allocates.
//
//   DeviceArena arena(compute);
//   arena.plan(ln1, N * C);   // float* ln1
//   arena.plan(qkv, N * 3 * C);
//   arena.allocate();          // ln1, qkv now point into one zero-filled allocation
//
// A sizing arena (no Compute) only adds up: plan the same arrays, read bytes(), allocate
// nothing. Models use one to say what they would need without building themselves.
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <vector>

#include "kernels/compute.h"

namespace rm {

class DeviceArena {
 public:
  static constexpr size_t kAlign = 256;

  explicit DeviceArena(Compute& compute) : compute_(&compute) {}
  DeviceArena() = default;  // sizing only

  // Reserves n elements for `ptr`, which allocate() will set (ptr must outlive that call).
  template <typename T>
  void plan(T*& ptr, size_t n) {
    const size_t offset = bytes_;
    if (compute_ != nullptr) {
      bindings_.push_back(
          [&ptr, offset](char* base) { ptr = reinterpret_cast<T*>(base + offset); });
    }
    bytes_ = (bytes_ + n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    array_bytes_.push_back(n * sizeof(T));
  }
  // Allocates every planned array at once (zero-filled) and sets the pointers. Once only.
  void allocate() {
    if (compute_ == nullptr) throw std::logic_error("DeviceArena: a sizing arena cannot allocate");
    memory_ = DeviceArray<char>(*compute_, bytes_);
    for (const auto& bind : bindings_) bind(memory_.data());
    bindings_.clear();
  }
  size_t bytes() const { return bytes_; }
  // Each planned array's size in bytes, in plan order (the memory tests look for one of a
  // given size, e.g. attention's [B,H,T,T]).
  const std::vector<size_t>& array_bytes() const { return array_bytes_; }

 private:
  Compute* compute_ = nullptr;
  size_t bytes_ = 0;
  std::vector<size_t> array_bytes_;
  std::vector<std::function<void(char*)>> bindings_;
  DeviceArray<char> memory_;
};

}  // namespace rm
