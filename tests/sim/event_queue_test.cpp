#include <catch2/catch.hpp>

#include <vector>

#include "sim/event_queue.hpp"

using namespace parasim::sim;

TEST_CASE("time is exact integer picoseconds", "[sim][time]") {
  CHECK(Time::ns(3).picoseconds() == 3000);
  CHECK(Time::seconds(2e-6).picoseconds() == 2'000'000);
  CHECK(Time::seconds(1.0).to_seconds() == 1.0);
  CHECK(Time::ns(1) + Time::ps(5) == Time::ps(1005));
  CHECK(Time::ns(2) > Time::ns(1));
  // 0.1 + 0.2 in floating point is not 0.3; in picoseconds it is.
  CHECK(Time::seconds(0.1) + Time::seconds(0.2) == Time::seconds(0.3));
}

TEST_CASE("events pop in time order, ties in insertion order", "[sim][queue]") {
  BinaryHeapQueue q;
  q.push(Time::ns(30), 1);
  q.push(Time::ns(10), 2);
  q.push(Time::ns(20), 3);
  q.push(Time::ns(10), 4);  // same time as payload 2, scheduled later
  q.push(Time::ns(10), 5);
  std::vector<std::uint64_t> order;
  while (!q.empty()) order.push_back(q.pop().payload);
  CHECK(order == std::vector<std::uint64_t>{2, 4, 5, 3, 1});
  CHECK(q.now() == Time::ns(30));
}

TEST_CASE("the queue refuses to go back in time", "[sim][queue]") {
  BinaryHeapQueue q;
  q.push(Time::ns(10), 1);
  q.pop();
  CHECK_THROWS_AS(q.push(Time::ns(5), 2), std::logic_error);
  CHECK_NOTHROW(q.push(Time::ns(10), 3));  // same time is fine
  CHECK_THROWS_AS((q.pop(), q.pop()), std::logic_error);
}

TEST_CASE("a large interleaved schedule pops sorted and stable", "[sim][queue]") {
  // 10,000 events at 97 distinct times pushed in a scrambled order: the popped sequence
  // is sorted by time and, within a time, by sequence number.
  BinaryHeapQueue q;
  for (std::uint64_t i = 0; i < 10000; ++i) q.push(Time::ns(static_cast<std::int64_t>((i * 7919) % 97)), i);
  Event prev = q.pop();
  while (!q.empty()) {
    const Event e = q.pop();
    CHECK((e.time > prev.time || (e.time == prev.time && e.sequence > prev.sequence)));
    prev = e;
  }
}
