// Writing files so that a reader never sees half of one, and a crash leaves either the old file
// or the new one: the bytes go to a temporary name beside the file (PATH.tmp.PID), are flushed
// to disk (fsync) and renamed over it. The one implementation for checkpoints, run directories
// and timelines.
//
// Thread-safety: the functions are independent; two writers of one path race as rename(2) does.
#pragma once

#include <string>
#include <string_view>

namespace gyre::files {

// PATH.tmp.PID: the temporary name a file is written under before it is renamed to PATH.
std::string temporaryPath(const std::string& path);

// Writes `bytes` to temporaryPath(path), fsyncs it and renames it to `path` (the directory is
// not fsynced: syncDirectory). Throws gyre::SystemError naming `path` and the reason ("No space
// left on device (the disk is full)", "Permission denied", ...), after removing the temporary.
void writeAtomically(const std::string& path, std::string_view bytes);

// For a file another writer produced at `temporary` (torch::save, say): fsyncs it and renames
// it to `path`. Throws gyre::SystemError naming both, after removing the temporary.
void commit(const std::string& temporary, const std::string& path);

// Throws gyre::SystemError "cannot WHAT PATH: strerror(error)", saying when the disk is full.
[[noreturn]] void fail(const std::string& what, const std::string& path, int error);

// fsync of a directory, so the renames in it survive a crash (a file system that cannot sync a
// directory counts as done). Throws gyre::SystemError.
void syncDirectory(const std::string& dir);

}  // namespace gyre::files
