#include "exec/device.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

namespace parasim::exec {

Buffer::~Buffer() {
  if (owner_ != nullptr && data_ != nullptr) owner_->release(data_, bytes_);
}

bool Device::poison_memory() {
  static const bool on = [] {
    const char* v = std::getenv("PARASIM_POISON_MEMORY");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return on;
}

Buffer Device::allocate(std::size_t bytes) {
  if (capacity_ != 0 && in_use_ + bytes > capacity_) {
    throw OutOfMemory(fmt::format("rank {}: out of device memory allocating {:.1f} MiB ({:.1f} MiB in use of {:.1f} MiB)",
                                  rank(), static_cast<double>(bytes) / 1048576.0,
                                  static_cast<double>(in_use_) / 1048576.0, static_cast<double>(capacity_) / 1048576.0));
  }
  void* p = raw_allocate(std::max<std::size_t>(bytes, 1));
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
  return Buffer(this, p, bytes);
}

// No ring attention on this backend (the CPU backend overrides these).
namespace {
[[noreturn]] void no_ring_attention() {
  throw std::logic_error("this backend has no ring attention kernels (context parallelism runs on the cpu backend)");
}
}  // namespace

void Device::kv_pack(float*, const float*, std::int64_t, int) { no_ring_attention(); }
void Device::kv_unpack_add(float*, const float*, std::int64_t, int) { no_ring_attention(); }
void Device::ring_attention_begin(float*, float*, float*, int, int, int, int) { no_ring_attention(); }
void Device::ring_attention_block(float*, float*, float*, const float*, const float*, std::span<const int>,
                                  std::span<const int>, int, int, int) {
  no_ring_attention();
}
void Device::ring_attention_end(float*, float*, const float*, const float*, const float*, int, int, int, int) {
  no_ring_attention();
}
void Device::ring_attention_block_backward(float*, float*, const float*, const float*, const float*, const float*,
                                           const float*, std::span<const int>, std::span<const int>, int, int, int) {
  no_ring_attention();
}

}  // namespace parasim::exec
