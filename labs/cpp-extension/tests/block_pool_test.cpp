// The grader's test main for Part 1, compiled with the learner's block_pool.h
// under AddressSanitizer + LeakSanitizer and run once per case:
//   ./block_pool_test <case>
// A failed check prints "CHECK FAILED block_pool_test.cpp:<line>: <what>" and
// exits 1; a memory error is reported by ASan (exit 86) with the learner's
// file:line in its stack trace.
#include "block_pool.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define CHECK(cond, ...)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::printf("CHECK FAILED block_pool_test.cpp:%d: %s: ", __LINE__, #cond);  \
      std::printf(__VA_ARGS__);                                                   \
      std::printf("\n");                                                          \
      std::fflush(stdout);                                                        \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

// Touch every byte of a block: ASan reports a block that is not really
// block_bytes long, or that points outside the pool.
static void fill(BlockPool& p, int id, unsigned char v) {
  std::memset(p.data(id), v, p.block_bytes());
}
static bool holds(BlockPool& p, int id, unsigned char v) {
  const auto* b = reinterpret_cast<const unsigned char*>(p.data(id));
  for (std::size_t i = 0; i < p.block_bytes(); ++i) if (b[i] != v) return false;
  return true;
}

static void case_allocate_order() {
  BlockPool p(5, 48);
  CHECK(p.num_blocks() == 5 && p.block_bytes() == 48 && p.num_free() == 5, "fresh pool: num_blocks=%zu block_bytes=%zu num_free=%zu, expected 5, 48, 5", p.num_blocks(), p.block_bytes(), p.num_free());
  for (int want = 0; want < 5; ++want) {
    int got = p.allocate();
    CHECK(got == want, "allocate() #%d returned %d, expected %d (ids 0, 1, 2, ... first)", want, got, want);
    CHECK(p.num_free() == static_cast<std::size_t>(4 - want), "num_free()=%zu after %d allocations", p.num_free(), want + 1);
  }
  int extra = p.allocate();
  CHECK(extra == -1, "allocate() on a full pool returned %d, expected -1", extra);
}

static void case_free_reuse_lifo() {
  BlockPool p(6, 16);
  for (int i = 0; i < 6; ++i) p.allocate();
  p.free(4); p.free(1); p.free(3);
  CHECK(p.num_free() == 3, "num_free()=%zu after 3 frees, expected 3", p.num_free());
  int a = p.allocate(), b = p.allocate(), c = p.allocate();
  CHECK(a == 3 && b == 1 && c == 4, "after free(4), free(1), free(3) allocate() gave %d, %d, %d, expected 3, 1, 4 (last freed first)", a, b, c);
  CHECK(p.allocate() == -1, "pool should be full again");
}

static void case_blocks_are_disjoint() {
  BlockPool p(7, 24);
  int ids[7];
  for (int i = 0; i < 7; ++i) { ids[i] = p.allocate(); fill(p, ids[i], static_cast<unsigned char>(i + 1)); }
  for (int i = 0; i < 7; ++i) CHECK(holds(p, ids[i], static_cast<unsigned char>(i + 1)), "block %d was overwritten by another block: blocks overlap", ids[i]);
  for (int i = 1; i < 7; ++i) CHECK(p.data(i) - p.data(i - 1) == 24, "data(%d) - data(%d) = %td bytes, expected block_bytes = 24", i, i - 1, p.data(i) - p.data(i - 1));
}

static void case_bad_free_throws() {
  BlockPool p(3, 8);
  int id = p.allocate();
  p.free(id);
  bool invalid = false;
  try { p.free(id); } catch (const std::invalid_argument&) { invalid = true; } catch (...) {}
  CHECK(invalid, "free(%d) twice did not throw std::invalid_argument", id);
  CHECK(p.num_free() == 3, "a rejected double free changed num_free() to %zu (expected 3)", p.num_free());
  bool never = false;
  try { p.free(2); } catch (const std::invalid_argument&) { never = true; } catch (...) {}
  CHECK(never, "free(2) of a block never allocated did not throw std::invalid_argument");
  for (int bad : {-1, 3, 1000}) {
    bool range = false;
    try { p.free(bad); } catch (const std::out_of_range&) { range = true; } catch (...) {}
    CHECK(range, "free(%d) on a 3-block pool did not throw std::out_of_range", bad);
  }
}

static void case_data_checks_range() {
  BlockPool p(3, 8);
  CHECK(p.data(2) - p.data(0) == 16, "data(2) - data(0) = %td bytes, expected 2 * block_bytes = 16", p.data(2) - p.data(0));
  for (int bad : {-1, 3, 1000}) {
    bool range = false;
    try { (void)p.data(bad); } catch (const std::out_of_range&) { range = true; } catch (...) {}
    CHECK(range, "data(%d) on a 3-block pool did not throw std::out_of_range (a pointer outside the pool)", bad);
  }
}

static void case_move_construct() {
  BlockPool src(4, 32);
  int a = src.allocate(), b = src.allocate();
  fill(src, a, 0xAB); fill(src, b, 0xCD);
  std::byte* where = src.data(a);
  BlockPool dst(std::move(src));
  CHECK(dst.num_blocks() == 4 && dst.block_bytes() == 32 && dst.num_free() == 2, "moved-to pool: num_blocks=%zu block_bytes=%zu num_free=%zu, expected 4, 32, 2", dst.num_blocks(), dst.block_bytes(), dst.num_free());
  CHECK(dst.data(a) == where && holds(dst, a, 0xAB) && holds(dst, b, 0xCD), "moving must transfer the same storage (no copy, contents kept)");
  CHECK(src.num_blocks() == 0 && src.num_free() == 0, "moved-from pool must be empty: num_blocks=%zu num_free=%zu, expected 0, 0", src.num_blocks(), src.num_free());
  int got = src.allocate();
  CHECK(got == -1, "allocate() on a moved-from pool returned %d, expected -1 (it must own nothing)", got);
  CHECK(dst.allocate() == 1 + b, "the moved-to pool continues where the source stopped");
}

static void case_move_assign() {
  BlockPool src(3, 64);
  BlockPool dst(9, 8);  // its old storage must be released by the assignment (LeakSanitizer checks)
  int a = src.allocate(); fill(src, a, 0x5A);
  dst = std::move(src);
  CHECK(dst.num_blocks() == 3 && dst.block_bytes() == 64 && dst.num_free() == 2, "after dst = std::move(src): num_blocks=%zu block_bytes=%zu num_free=%zu, expected 3, 64, 2", dst.num_blocks(), dst.block_bytes(), dst.num_free());
  CHECK(holds(dst, a, 0x5A), "move assignment lost the block contents");
  CHECK(src.num_blocks() == 0 && src.num_free() == 0 && src.allocate() == -1, "moved-from pool must be empty after move assignment");
  // A moved-from pool can be assigned to again and used.
  src = BlockPool(2, 8);
  CHECK(src.allocate() == 0 && src.num_blocks() == 2, "a moved-from pool must accept a new pool");
}

static void case_self_move_assign() {
  BlockPool p(3, 16);
  int a = p.allocate(); fill(p, a, 0x11);
  BlockPool& alias = p;
  p = std::move(alias);
  CHECK(p.num_blocks() == 3 && p.num_free() == 2 && holds(p, a, 0x11), "self move-assignment must leave the pool unchanged");
}

// Copying must not compile. If the class is copyable anyway, copy it here so
// that a shallow copy shows up as the double free it is.
template <class Pool>
static void copy_if_copyable(Pool& p) {
  if constexpr (std::is_copy_constructible_v<Pool>) {
    Pool copy(p);
    (void)copy;
  }
}

static void case_copy_is_deleted() {
  {
    BlockPool p(2, 16);
    copy_if_copyable(p);
  }  // a shallow copy and p both free the buffer here: ASan reports the double free
  CHECK(!std::is_copy_constructible_v<BlockPool>, "BlockPool is copy-constructible: delete the copy constructor");
  CHECK(!std::is_copy_assignable_v<BlockPool>, "BlockPool is copy-assignable: delete the copy assignment");
}

static void case_moves_are_noexcept() {
  CHECK(std::is_nothrow_move_constructible_v<BlockPool>, "the move constructor must be noexcept (std::vector only moves noexcept types)");
  CHECK(std::is_nothrow_move_assignable_v<BlockPool>, "the move assignment must be noexcept");
}

// A rejected free() (out of range or not in use) changes nothing: the free
// list, the counts and which blocks are in use are as before the call.
static void case_rejected_calls_change_nothing() {
  BlockPool p(4, 8);
  int a = p.allocate(), b = p.allocate(), c = p.allocate();  // 0, 1, 2 in use; 3 free
  p.free(b);                                                  // free list: 3, then 1 (1 comes out first)
  for (int bad : {b, 3, -1, 4}) {
    try { p.free(bad); } catch (const std::exception&) {}
    CHECK(p.num_free() == 2, "after a rejected free(%d), num_free()=%zu, expected 2 (a rejected call changes nothing)", bad, p.num_free());
  }
  int x = p.allocate(), y = p.allocate(), z = p.allocate();
  CHECK(x == b && y == 3 && z == -1, "after rejected frees, allocate() gave %d, %d, %d, expected %d, 3, -1 (a rejected call changes nothing)", x, y, z, b);
  p.free(a); p.free(c);  // still in use, so these must succeed
  CHECK(p.num_free() == 2, "num_free()=%zu after freeing blocks %d and %d, expected 2", p.num_free(), a, c);
}

static void case_many_pools() {
  // Pools in a vector: growth moves them (noexcept) and every one is freed.
  std::vector<BlockPool> pools;
  for (int i = 0; i < 20; ++i) { pools.emplace_back(static_cast<std::size_t>(i + 1), 40); fill(pools.back(), pools.back().allocate(), 7); }
  for (int i = 0; i < 20; ++i) CHECK(pools[i].num_blocks() == static_cast<std::size_t>(i + 1) && holds(pools[i], 0, 7), "pool %d changed after the vector grew", i);
  BlockPool empty(0, 16);
  CHECK(empty.num_free() == 0 && empty.allocate() == -1, "a pool of 0 blocks has nothing to hand out");
}

// `./block_pool_test script NUM_BLOCKS BLOCK_BYTES OP...`: the grader's random script
// (test_block_pool.py::test_block_pool_script). This binary only reports what the pool
// did, one line per op; the grader compares the lines with its own model, so nothing
// printed here is a verdict (the learner's code, linked in, could print anything).
//   a         allocate()            -> the id
//   n         num_free()            -> the count
//   f<id>     free(id)              -> ok | range | invalid | other
//   w<id>:<v> fill block id with v  -> ok | range | other
//   r<id>:<v> every byte of id == v -> 1 | 0 | range | other
//   m         move the pool into a new one -> the moved-from num_blocks num_free
static int run_script(int argc, char** argv) {
  std::vector<BlockPool> pools;
  pools.emplace_back(std::strtoul(argv[2], nullptr, 10), std::strtoul(argv[3], nullptr, 10));
  for (int i = 4; i < argc; ++i) {
    BlockPool& p = pools.back();
    const char* op = argv[i];
    const int id = std::atoi(op + 1);
    const char* colon = std::strchr(op, ':');
    const unsigned char v = static_cast<unsigned char>(colon ? std::atoi(colon + 1) : 0);
    try {
      switch (op[0]) {
        case 'a': std::printf("%d\n", p.allocate()); break;
        case 'n': std::printf("%zu\n", p.num_free()); break;
        case 'f': p.free(id); std::printf("ok\n"); break;
        case 'w': (void)p.data(id); fill(p, id, v); std::printf("ok\n"); break;
        case 'r': (void)p.data(id); std::printf("%d\n", holds(p, id, v) ? 1 : 0); break;
        case 'm': {
          BlockPool moved(std::move(p));
          std::printf("%zu %zu\n", p.num_blocks(), p.num_free());
          pools.push_back(std::move(moved));
          break;
        }
        default: std::printf("bad op %s\n", op); return 2;
      }
    } catch (const std::out_of_range&) {
      std::printf("range\n");
    } catch (const std::invalid_argument&) {
      std::printf("invalid\n");
    } catch (...) {
      std::printf("other\n");
    }
  }
  std::printf("END\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 4 && std::strcmp(argv[1], "script") == 0) return run_script(argc, argv);
  const std::pair<const char*, void (*)()> cases[] = {
      {"allocate_order", case_allocate_order},   {"free_reuse_lifo", case_free_reuse_lifo},
      {"blocks_are_disjoint", case_blocks_are_disjoint}, {"bad_free_throws", case_bad_free_throws},
      {"data_checks_range", case_data_checks_range},
      {"move_construct", case_move_construct},   {"move_assign", case_move_assign},
      {"self_move_assign", case_self_move_assign}, {"copy_is_deleted", case_copy_is_deleted},
      {"moves_are_noexcept", case_moves_are_noexcept}, {"rejected_calls_change_nothing", case_rejected_calls_change_nothing},
      {"many_pools", case_many_pools},
  };
  if (argc != 2) { std::printf("usage: %s <case>\n", argv[0]); return 2; }
  for (const auto& [name, fn] : cases) {
    if (std::strcmp(name, argv[1]) == 0) { fn(); std::printf("OK %s\n", name); return 0; }
  }
  std::printf("unknown case %s\n", argv[1]);
  return 2;
}
