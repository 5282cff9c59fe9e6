#include "torch/parameter_check.h"

#include <cstdint>
#include <map>
#include <sstream>

#include "common/check.h"
#include "gyre/errors.h"

namespace gyre::torch {
namespace {

// One tensor as the ranks compare it.
struct Entry {
  std::string name;
  std::string shape;  // "[4, 8]"
  std::string dtype;  // "Float"
  bool operator==(const Entry&) const = default;
};

// Tabs and newlines separate the fields and the entries of the text the ranks exchange.
std::string clean(std::string text) {
  for (char& c : text)
    if (c == '\t' || c == '\n') c = ' ';
  return text;
}

std::string serialize(const std::vector<::torch::Tensor>& tensors, const std::vector<std::string>& names) {
  std::ostringstream out;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    out << (i < names.size() ? clean(names[i]) : "") << '\t' << tensors[i].sizes() << '\t'
        << ::c10::toString(tensors[i].scalar_type()) << '\n';
  return out.str();
}

std::vector<Entry> parse(const std::string& text) {
  std::vector<Entry> entries;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    Entry e;
    const auto first = line.find('\t');
    const auto second = line.find('\t', first + 1);
    e.name = line.substr(0, first);
    e.shape = line.substr(first + 1, second - first - 1);
    e.dtype = line.substr(second + 1);
    entries.push_back(std::move(e));
  }
  return entries;
}

// FNV-1a, halved into a non-negative int64 (the digest travels as int64).
std::int64_t fingerprint(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return static_cast<std::int64_t>(h >> 1);
}

// "rank 1", "ranks 0, 2".
std::string rankList(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

std::string describe(const Entry& e) {
  return e.shape + " " + e.dtype;
}

// The first difference between rank a's list and rank b's, as a sentence.
std::string firstDifference(const std::vector<Entry>& a, int rankA, const std::vector<Entry>& b, int rankB,
                            int me) {
  auto rank = [me](int r) { return "rank " + std::to_string(r) + (r == me ? " (this rank)" : ""); };
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  std::ostringstream out;
  out << rank(rankA) << " has " << a.size() << " parameters, " << rank(rankB) << " has " << b.size()
      << "; the first that differs is parameter " << i;
  const Entry* name = i < a.size() ? &a[i] : i < b.size() ? &b[i] : nullptr;
  if (name && !name->name.empty()) out << " ('" << name->name << "')";
  out << ": " << (i < a.size() ? describe(a[i]) : "none") << " on rank " << rankA << ", "
      << (i < b.size() ? describe(b[i]) : "none") << " on rank " << rankB;
  if (i < a.size() && i < b.size() && a[i].name != b[i].name)
    out << " (named '" << a[i].name << "' and '" << b[i].name << "')";
  return out.str();
}

}  // namespace

void checkSameParameters(Communicator& comm, const std::vector<::torch::Tensor>& tensors,
                         const std::vector<std::string>& names, std::string_view what, Timeout timeout) {
  const int world = comm.size();
  if (world <= 1) return;
  const std::string mine = serialize(tensors, names);
  // The one collective of the usual case: count and hash of every rank's list.
  CollectiveOptions o;
  o.dtype = DataType::kInt64;
  o.timeout = timeout;
  const std::int64_t digest[2] = {static_cast<std::int64_t>(tensors.size()), fingerprint(mine)};
  std::vector<std::int64_t> digests(2 * static_cast<std::size_t>(world));
  comm.allgather(digest, digests.data(), 2, o);
  auto digestOf = [&](int r) { return std::make_pair(digests[2 * r], digests[2 * r + 1]); };
  bool same = true;
  for (int r = 1; r < world; ++r) same = same && digestOf(r) == digestOf(0);
  if (same) return;

  // They differ: every rank gathers every list, so that all name the same difference.
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(world));
  const auto length = static_cast<std::int64_t>(mine.size());
  comm.allgather(&length, lengths.data(), 1, o);
  std::vector<std::size_t> counts(lengths.begin(), lengths.end());
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  std::string gathered(total, '\0');
  CollectiveOptions bytes = o;
  bytes.dtype = DataType::kUInt8;
  comm.allgatherv(mine.data(), gathered.data(), counts, bytes);
  std::vector<std::vector<Entry>> lists;
  for (std::size_t r = 0, at = 0; r < counts.size(); at += counts[r], ++r)
    lists.push_back(parse(gathered.substr(at, counts[r])));

  // The reference is the list most ranks hold (ties: the lowest rank's); the others differ.
  std::map<std::pair<std::int64_t, std::int64_t>, int> holders;
  int reference = 0;
  for (int r = 0; r < world; ++r)
    if (++holders[digestOf(r)] > holders[digestOf(reference)]) reference = r;
  std::vector<int> agree, differ;
  for (int r = 0; r < world; ++r) (digestOf(r) == digestOf(reference) ? agree : differ).push_back(r);
  reference = agree.front();
  const int me = comm.rank();
  // This rank against the other side: a differing rank against the reference, a rank that agrees
  // against the first that differs.
  const bool odd = digestOf(me) != digestOf(reference);
  const int a = odd ? me : differ.front();
  const int b = odd ? reference : me;
  GYRE_THROW(
      InvalidArgument, what, ": the ranks hold different parameters (every rank must pass the same model, ",
      "its parameters in the same order): ", rankList(differ), " differ", differ.size() == 1 ? "s" : "",
      " from ", rankList(agree), ". ", firstDifference(lists[a], a, lists[b], b, me));
}

}  // namespace gyre::torch
