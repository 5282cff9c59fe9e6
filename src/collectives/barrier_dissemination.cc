// Dissemination barrier: in round k = 0..ceil(log2 p)-1 rank r sends one byte to r + 2^k and
// receives one byte from r - 2^k. A rank enters round k+1 only when round k's byte has arrived,
// so after the last round every rank has heard, directly or through others, from every rank.
// All rounds are one op list. Each round's receive names the previous round's receive as
// `after`, and each round's send the previous round's receive, so a rank sends in round k+1
// only after it has heard in every round up to k (waiting on round k alone would let a message
// overtake what the rounds before it carry). The 2^k are distinct and below p, so no two rounds
// use the same peer in the same direction.
//
// Per rank: ceil(log2 p) one-byte messages each way. T = ceil(log2 p)·α.
#include <array>

#include "collectives/algorithms.h"
#include "collectives/op_list.h"

namespace gyre::collectives {

void barrierDissemination(Context& c) {
  const int p = c.size();
  const int r = c.rank();
  static constexpr std::byte kToken{1};
  std::array<std::byte, 32> arrived{};
  OpList ops;
  int previous = -1;
  int round = 0;
  for (int distance = 1; distance < p; distance *= 2, ++round) {
    ops.send(wrap(r + distance, p), &kToken, 1, previous);
    previous = ops.recv(wrap(r - distance, p), &arrived[static_cast<std::size_t>(round)], 1, previous);
  }
  ops.run(c);
}

}  // namespace gyre::collectives
