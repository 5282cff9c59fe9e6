// Writing a run directory's files so that a reader never sees half a file: each is written to a
// temporary name beside it and renamed over the old one.
#pragma once

#include <string>

namespace gyre::train {

// Creates `dir` and its parents. Throws gyre::Error naming it when it cannot.
void createRunDirectory(const std::string& dir);

// PATH.tmp.PID: the temporary name a file is written under before commitFile.
std::string temporaryPathFor(const std::string& path);

// Writes `content` to PATH.tmp, flushes it to disk and renames it to `path` (as checkpoint
// files are written). Throws gyre::SystemError naming the path and the reason (disk full,
// permission denied, ...), and removes the temporary file.
void writeFileAtomically(const std::string& path, const std::string& content);

// Renames a finished temporary file to `path`; throws gyre::Error naming both on failure (and
// removes the temporary file).
void commitFile(const std::string& temporary, const std::string& path);

}  // namespace gyre::train
