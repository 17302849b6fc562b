#include "checkpoint/checkpoint_reader.h"

#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/io_progress.h"
#include "checkpoint/xxh_state.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoint files store floats little-endian, as they are in memory here");

namespace rm {
namespace {

// As the writer's chunks (checkpoint_writer.cc): each chunk read is hashed while in L2 cache.
constexpr size_t kBounceBytes = size_t{256} << 10;

}  // namespace

Manifest load_manifest(const std::string& ckpt_dir) {
  return load_manifest(ckpt_dir, nullptr);
}

Manifest load_manifest(const std::string& ckpt_dir, std::string* digest) {
  const std::string path = io::join(ckpt_dir, kManifestFileName);
  io::Fd fd = io::open_read(path);
  const uint64_t size = io::regular_file_size(fd.get(), path);
  if (size > kMaxManifestBytes) {
    throw CheckpointError(path + ": " + std::to_string(size) + " bytes, larger than the " +
                          std::to_string(kMaxManifestBytes >> 20) + " MiB a manifest may have");
  }
  std::string text(size, '\0');
  io::pread_exact(fd.get(), text.data(), text.size(), 0, path);
  if (digest != nullptr) *digest = hex64(XXH64(text.data(), text.size(), 0));
  return parse_manifest(text, path);
}

CheckpointReader::CheckpointReader(std::string ckpt_dir)
    : CheckpointReader(ckpt_dir, load_manifest(ckpt_dir)) {
  // A manifest copied into the wrong directory would be read as another step: a resume, and
  // sample, export and init_from (which read through this too), all refuse it alike.
  if (const auto name = parse_step_dir_name(io::base_name(dir_))) {
    if (name->step != manifest_.step) {
      throw CheckpointError(io::join(dir_, kManifestFileName) +
                            ": step: " + std::to_string(manifest_.step) +
                            ", but the directory is " + io::base_name(dir_));
    }
  }
}

CheckpointReader::CheckpointReader(std::string ckpt_dir, Manifest manifest)
    : dir_(std::move(ckpt_dir)), manifest_(std::move(manifest)) {
  validate_manifest(manifest_, io::join(dir_, kManifestFileName));
  fds_.assign(manifest_.files.size(), -1);
  identity_.resize(manifest_.files.size());
  verified_.resize(manifest_.files.size());
  index_.resize(manifest_.buffers.size());
  for (size_t f = 0; f < manifest_.files.size(); ++f) {
    const auto& pieces = manifest_.files[f].pieces;
    verified_[f].assign(pieces.size(), false);
    for (size_t p = 0; p < pieces.size(); ++p) {
      if (pieces[p].end == pieces[p].begin) continue;
      size_t b = 0;
      while (manifest_.buffers[b].name != pieces[p].buffer) ++b;  // validated: it exists
      index_[b].push_back(PieceRef{pieces[p].begin, pieces[p].end, f, p});
    }
  }
  for (auto& refs : index_) {
    std::sort(refs.begin(), refs.end(),
              [](const PieceRef& a, const PieceRef& b) { return a.begin < b.begin; });
  }
}

CheckpointReader::~CheckpointReader() {
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

std::string CheckpointReader::file_path(size_t file) const {
  return io::join(dir_, manifest_.files[file].name);
}

int CheckpointReader::file_fd(size_t file) {
  if (fds_[file] >= 0) {
    // Most recently used goes last; the list is short, a scan costs nothing beside a read.
    open_.erase(std::find(open_.begin(), open_.end(), file));
    open_.push_back(file);
    return fds_[file];
  }
  const std::string path = file_path(file);
  if (!io::exists(path)) {
    throw CheckpointError(path + ": missing (listed in " + kManifestFileName + ")");
  }
  if (open_.size() >= kMaxOpenFiles) {
    ::close(fds_[open_.front()]);
    fds_[open_.front()] = -1;
    open_.erase(open_.begin());
  }
  io::Fd fd = io::open_read(path);
  const uint64_t size = io::regular_file_size(fd.get(), path);
  const uint64_t want = manifest_.files[file].size;
  if (size != want) {
    throw CheckpointError(path + ": " + std::to_string(size) + " bytes, manifest says " +
                          std::to_string(want) + (size < want ? " (truncated)" : ""));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) io::throw_errno(path, "fstat", errno);
  FileIdentity& id = identity_[file];
  const uint64_t device = static_cast<uint64_t>(st.st_dev),
                 inode = static_cast<uint64_t>(st.st_ino);
  if (id.known && (id.device != device || id.inode != inode)) {
    // Its checked pieces would be read without their checksums: refuse instead.
    throw CheckpointError(path +
                          ": replaced while the checkpoint was being read (another "
                          "file now has its name)");
  }
  id = FileIdentity{device, inode, true};
  fds_[file] = fd.release();
  open_.push_back(file);
  return fds_[file];
}

void CheckpointReader::check_files() {
  for (size_t f = 0; f < manifest_.files.size(); ++f) file_fd(f);
}

void CheckpointReader::hash_bytes(int fd, uint64_t offset, uint64_t bytes, const std::string& path,
                                  void* state) {
  if (bytes == 0) return;
  if (bounce_.empty()) bounce_.resize(kBounceBytes);
  set_io_activity("read");
  while (bytes > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, bounce_.size()));
    io::pread_exact(fd, bounce_.data(), n, offset, path);
    note_io_progress();
    XXH64_update(static_cast<XXH64_state_t*>(state), bounce_.data(), n);
    offset += n;
    bytes -= n;
  }
}

void CheckpointReader::checksum_mismatch(size_t file, size_t piece, uint64_t got) const {
  const PieceInfo& p = manifest_.files[file].pieces[piece];
  throw CheckpointError(file_path(file) + ": checksum mismatch in piece " + p.buffer + "[" +
                        std::to_string(p.begin) + "," + std::to_string(p.end) + ") at bytes [" +
                        std::to_string(p.offset) + "," + std::to_string(p.offset + p.bytes) +
                        "): manifest says xxh64 " + hex64(p.xxh64) + ", data hashes to " +
                        hex64(got) + " (the file is corrupted)");
}

void CheckpointReader::verify_piece(size_t file, size_t piece) {
  if (verified_[file][piece]) return;
  const PieceInfo& p = manifest_.files[file].pieces[piece];
  const int fd = file_fd(file);
  XxhState h;
  hash_bytes(fd, p.offset, p.bytes, file_path(file), h.s);
  const uint64_t got = XXH64_digest(h.s);
  if (got != p.xxh64) checksum_mismatch(file, piece, got);
  verified_[file][piece] = true;
}

uint64_t CheckpointReader::verify_share(const VerifyShare& share, VerifyLevel level) {
  if (share.parts < 1 || share.part < 0 || share.part >= share.parts) {
    throw std::invalid_argument("verify_share: part " + std::to_string(share.part) + " of " +
                                std::to_string(share.parts));
  }
  // 128 bits: a hostile manifest's bytes (up to 2^72 in all), times parts (< 2^21), fit.
  using u128 = unsigned __int128;
  u128 total = 0;
  for (const ShardFileInfo& file : manifest_.files) {
    for (const PieceInfo& p : file.pieces) total += p.bytes;
  }
  const auto parts = static_cast<size_t>(share.parts);
  std::vector<size_t> files;                      // this part's, in manifest order
  std::vector<std::pair<size_t, size_t>> pieces;  // (file, piece)
  u128 before = 0;  // bytes of the pieces before this one, in manifest order
  for (size_t f = 0; f < manifest_.files.size(); ++f) {
    const auto& list = manifest_.files[f].pieces;
    bool mine = list.empty() && f % parts == static_cast<size_t>(share.part);
    for (size_t p = 0; p < list.size(); ++p) {
      const u128 middle = before + list[p].bytes / 2;
      before += list[p].bytes;
      const size_t owner =
          total == 0 ? f % parts
                     : static_cast<size_t>(std::min<u128>(middle * parts / total, parts - 1));
      if (owner != static_cast<size_t>(share.part)) continue;
      mine = true;
      pieces.emplace_back(f, p);
    }
    if (mine) files.push_back(f);
  }
  for (size_t f : files) file_fd(f);  // every size before any byte is read
  if (level != VerifyLevel::kChecksums) return 0;
  uint64_t hashed = 0;
  for (const auto& [f, p] : pieces) {
    if (!verified_[f][p]) hashed += manifest_.files[f].pieces[p].bytes;
    verify_piece(f, p);
  }
  return hashed;
}

void CheckpointReader::verify_all() {
  for (size_t f = 0; f < manifest_.files.size(); ++f) {
    for (size_t p = 0; p < manifest_.files[f].pieces.size(); ++p) verify_piece(f, p);
  }
}

// Reads elements [begin, end) (inside the piece) straight into dst. If the piece has not been
// verified yet, the rest of it is hashed too (through the bounce buffer) and the checksum is
// compared before returning: the wanted part costs no extra copy.
void CheckpointReader::read_piece(const PieceRef& ref, uint64_t begin, uint64_t end, float* dst) {
  const PieceInfo& p = manifest_.files[ref.file].pieces[ref.piece];
  const int fd = file_fd(ref.file);
  const std::string path = file_path(ref.file);
  const uint64_t part_offset = p.offset + (begin - p.begin) * sizeof(float);
  const uint64_t part_bytes = (end - begin) * sizeof(float);
  char* out = reinterpret_cast<char*>(dst);
  if (verified_[ref.file][ref.piece]) {
    // Straight into dst, in large reads that each count as progress (io_progress.h).
    constexpr uint64_t kReadBytes = uint64_t{64} << 20;
    set_io_activity("read");
    for (uint64_t done = 0; done < part_bytes;) {
      const size_t n = static_cast<size_t>(std::min(part_bytes - done, kReadBytes));
      io::pread_exact(fd, out + done, n, part_offset + done, path);
      note_io_progress();
      done += n;
    }
    return;
  }
  XxhState h;
  hash_bytes(fd, p.offset, part_offset - p.offset, path, h.s);
  set_io_activity("read");
  for (uint64_t done = 0; done < part_bytes;) {
    // Hash each chunk right after reading it, while it is in cache.
    const size_t n = static_cast<size_t>(std::min<uint64_t>(part_bytes - done, kBounceBytes));
    io::pread_exact(fd, out + done, n, part_offset + done, path);
    note_io_progress();
    XXH64_update(h.s, out + done, n);
    done += n;
  }
  const uint64_t part_end = part_offset + part_bytes;
  hash_bytes(fd, part_end, p.offset + p.bytes - part_end, path, h.s);
  const uint64_t got = XXH64_digest(h.s);
  if (got != p.xxh64) checksum_mismatch(ref.file, ref.piece, got);
  verified_[ref.file][ref.piece] = true;
}

void CheckpointReader::read_range(const std::string& buffer, uint64_t begin, uint64_t end,
                                  float* dst) {
  size_t b = 0;
  while (b < manifest_.buffers.size() && manifest_.buffers[b].name != buffer) ++b;
  if (b == manifest_.buffers.size()) {
    throw CheckpointError(dir_ + ": no buffer '" + buffer + "' in this checkpoint");
  }
  const uint64_t count = manifest_.buffers[b].count;
  if (begin > end || end > count) {
    throw CheckpointError(dir_ + ": cannot read [" + std::to_string(begin) + "," +
                          std::to_string(end) + ") of buffer '" + buffer + "' (" +
                          std::to_string(count) + " elements)");
  }
  if (begin == end) return;
  const std::vector<PieceRef>& refs = index_[b];
  // The first piece that ends after `begin`: pieces tile the buffer, so it contains `begin`.
  auto it = std::upper_bound(refs.begin(), refs.end(), begin,
                             [](uint64_t x, const PieceRef& r) { return x < r.end; });
  for (uint64_t at = begin; at < end; ++it) {
    if (it == refs.end() || it->begin > at) {  // impossible after validate_manifest
      throw CheckpointError(dir_ + ": buffer '" + buffer + "' has no piece at element " +
                            std::to_string(at));
    }
    const uint64_t stop = std::min(end, it->end);
    read_piece(*it, at, stop, dst + (at - begin));
    at = stop;
  }
}

std::vector<float> CheckpointReader::read_buffer(const std::string& buffer) {
  const BufferInfo* b = manifest_.find_buffer(buffer);
  if (b == nullptr) throw CheckpointError(dir_ + ": no buffer '" + buffer + "' in this checkpoint");
  // The manifest's count is only a claim until the files' real sizes back it: check them before
  // allocating count floats.
  for (const PieceRef& ref : index_[static_cast<size_t>(b - manifest_.buffers.data())]) {
    file_fd(ref.file);
  }
  std::vector<float> out(b->count);
  read_range(buffer, 0, b->count, out.data());
  return out;
}

void read_range(const std::string& ckpt_dir, const Manifest& manifest, const std::string& buffer,
                uint64_t begin, uint64_t end, float* dst) {
  CheckpointReader(ckpt_dir, manifest).read_range(buffer, begin, end, dst);
}

}  // namespace rm
