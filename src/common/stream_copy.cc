#include "common/stream_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace meshcomm {

void streamCopy(void* to, const void* from, size_t bytes) {
#if defined(__x86_64__)
  auto* out = static_cast<uint8_t*>(to);
  const auto* in = static_cast<const uint8_t*>(from);
  // Streaming stores need 16-byte aligned targets: plain copy up to there.
  const size_t head = (16 - reinterpret_cast<uintptr_t>(out) % 16) % 16;
  if (bytes < head + 64) {
    if (bytes > 0) std::memcpy(out, in, bytes);
    return;
  }
  std::memcpy(out, in, head);
  out += head;
  in += head;
  bytes -= head;
  // SSE2 is part of x86-64, so no dispatch: the write-combining buffers
  // merge the 16-byte stores into whole lines, and the copy is bound by
  // memory, not by the width of its instructions.
  const size_t body = bytes / 64 * 64;
  for (size_t i = 0; i < body; i += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 48), d);
  }
  if (bytes > body) std::memcpy(out + body, in + body, bytes - body);
  _mm_sfence();
#else
  std::memcpy(to, from, bytes);
#endif
}

}  // namespace meshcomm
