#include "report/gzip.hpp"

#include <stdexcept>
#include <zlib.h>

namespace parasim::report {

namespace {

// zlib's windowBits for a gzip header and trailer (15 + 16).
constexpr int gzip_window = 15 + 16;

}  // namespace

std::string gzip(std::string_view data) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, gzip_window, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("gzip: cannot start zlib");
  }
  std::string out;
  out.resize(deflateBound(&z, static_cast<uLong>(data.size())) + 64);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const std::size_t written = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("gzip: zlib could not compress the data");
  out.resize(written);
  return out;
}

std::string gunzip(std::string_view data) {
  z_stream z{};
  if (inflateInit2(&z, gzip_window) != Z_OK) throw std::runtime_error("gunzip: cannot start zlib");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      throw std::runtime_error(rc == Z_BUF_ERROR ? "the gzip stream is truncated" : "the gzip stream is damaged");
    }
    out.append(buf, sizeof buf - z.avail_out);
  }
  inflateEnd(&z);
  return out;
}

bool is_gzip(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f && static_cast<unsigned char>(data[1]) == 0x8b;
}

bool gzip_name(std::string_view path) {
  return path.size() > 3 && path.substr(path.size() - 3) == ".gz";
}

}  // namespace parasim::report
