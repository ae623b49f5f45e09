#include "report/gzip.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <zlib.h>

namespace parasim::report {

namespace {

// zlib's windowBits for a gzip header and trailer (15 + 16).
constexpr int gzip_window = 15 + 16;

}  // namespace

struct GzipWriter::Stream {
  z_stream z{};
};

GzipWriter::GzipWriter() : z_(std::make_unique<Stream>()) {
  if (deflateInit2(&z_->z, Z_BEST_SPEED, Z_DEFLATED, gzip_window, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("gzip: cannot start zlib");
  }
}

GzipWriter::~GzipWriter() {
  deflateEnd(&z_->z);
}

void GzipWriter::run(std::string_view data, int flush) {
  z_stream& z = z_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  int rc = Z_OK;
  do {
    // Room for what this piece compresses to, at least 64 KiB more.
    const std::size_t have = out_.size();
    out_.resize(have + std::max<std::size_t>(deflateBound(&z, z.avail_in), 1 << 16));
    z.next_out = reinterpret_cast<Bytef*>(out_.data() + have);
    z.avail_out = static_cast<uInt>(out_.size() - have);
    rc = deflate(&z, flush);
    out_.resize(out_.size() - z.avail_out);
    if (rc == Z_STREAM_ERROR) throw std::runtime_error("gzip: zlib could not compress the data");
  } while (z.avail_in > 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
}

void GzipWriter::add(std::string_view data) {
  // zlib counts in 32 bits: a piece of 4 GiB or more goes in parts.
  constexpr std::size_t part = std::size_t{1} << 30;
  for (std::size_t at = 0; at < data.size(); at += part) run(data.substr(at, part), Z_NO_FLUSH);
}

std::string GzipWriter::finish() {
  run({}, Z_FINISH);
  return std::move(out_);
}

std::string gzip(std::string_view data) {
  GzipWriter w;
  w.add(data);
  return w.finish();
}

std::string gunzip(std::string_view data, std::size_t limit) {
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
    const std::size_t got = sizeof buf - z.avail_out;
    if (got > limit - out.size()) {
      inflateEnd(&z);
      throw std::runtime_error(fmt::format("the gzip stream unpacks past {} bytes (the limit)", limit));
    }
    out.append(buf, got);
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
