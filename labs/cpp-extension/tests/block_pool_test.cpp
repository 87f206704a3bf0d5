// The grader's test main for Part 1, compiled with the learner's block_pool.h
// under AddressSanitizer + LeakSanitizer. It decides nothing: it runs a script
// of pool operations the grader chose from this grade's secret seed and prints
// what each one did, one line per operation. test_block_pool.py compares the
// lines with its own model of README.md, Part 1. (The learner's code is linked
// into this binary and could print anything; it cannot print the right answers
// to a script it has not seen without doing the pool's work.)
//
//   ./block_pool_test CANARY_BYTES OP...
//
//   P<n>:<b>   a new BlockPool(n, b) at the end of the pools, and select it -> its index
//   s<k>       select pool k                          -> ok
//   a          allocate()                             -> the id
//   n N B      num_free(), num_blocks(), block_bytes() -> the count
//   f<id>      free(id)                               -> ok | range | invalid | other
//   w<id>:<v>  fill every byte of block id with v     -> ok | range | other
//   r<id>:<v>  every byte of block id == v            -> 1 | 0 | range | other
//   d<id>      data(id) - data(0) in bytes            -> the offset | range | other
//   @<id>      which address data(id) is: 0 for the first address this run
//              printed, 1 for the next new one, ...   -> the index | range | other
//   m          BlockPool moved(std::move(selected)), kept at the end -> its index
//   M<k>       pools[k] = std::move(selected)         -> ok, or kept when the heap did not shrink by
//              at least pools[k]'s old num_blocks() * block_bytes() (its old storage was not released)
//   S          selected = std::move(selected)         -> ok
//
// (range: std::out_of_range, invalid: std::invalid_argument, other: any other
// exception.) After the script every pool is destroyed and the bytes still
// allocated on the heap since main began are printed (the grader requires 0:
// LeakSanitizer alone would not see a buffer a header keeps reachable from a
// global), then "END", and CANARY_BYTES are leaked on purpose: the grader
// requires LeakSanitizer to report exactly that one leak, which shows the leak
// check ran over the whole run and found nothing of the pool's.
//
// The standard headers come first, so a macro in block_pool.h cannot change
// them; the grader also refuses a header whose macros rename anything this
// file uses (test_block_pool.py).
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <exception>
#include <stdexcept>
#include <utility>
#include <vector>

#include "block_pool.h"

// Hooks the sanitizer runtime looks up in the program, defined here so that a
// header defining one (to turn LeakSanitizer off, suppress a leak or hide the
// report) does not compile. The environment sets the real options.
extern "C" int __lsan_is_turned_off() { return 0; }
extern "C" const char* __lsan_default_suppressions() { return ""; }
extern "C" const char* __lsan_default_options() { return ""; }
extern "C" const char* __asan_default_options() { return ""; }
extern "C" void __sanitizer_report_error_summary(const char* summary) { std::fprintf(stderr, "%s\n", summary); }

// The heap meter, defined here for the same reason: a header defining it (to report a constant) does not
// compile. This one asks the sanitizer runtime's own (the next definition after this program's; the link
// renames dlsym, so the grader calls the real one by its __real_ name).
extern "C" void* __real_dlsym(void* handle, const char* name);
extern "C" std::size_t __sanitizer_get_current_allocated_bytes() {
  using Meter = std::size_t (*)();
  static const Meter runtime = reinterpret_cast<Meter>(__real_dlsym(RTLD_NEXT, "__sanitizer_get_current_allocated_bytes"));
  return runtime();
}

namespace {

std::vector<BlockPool> pools;  // grows by emplace_back: earlier pools are moved each time it reallocates
std::size_t selected = 0;
std::vector<const std::byte*> addresses;  // every address @ printed, in order of first appearance

void fill(BlockPool& p, int id, unsigned char v) {
  std::memset(p.data(id), v, p.block_bytes());  // ASan reports a block that is not block_bytes long
}

std::size_t heap_bytes() { return __sanitizer_get_current_allocated_bytes(); }

bool holds(BlockPool& p, int id, unsigned char v) {
  const auto* b = reinterpret_cast<const unsigned char*>(p.data(id));
  for (std::size_t i = 0; i < p.block_bytes(); ++i) {
    if (b[i] != v) return false;
  }
  return true;
}

std::size_t address_index(const std::byte* where) {
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    if (addresses[i] == where) return i;
  }
  addresses.push_back(where);
  return addresses.size() - 1;
}

// One operation; returns false for an op this file does not know.
bool run(const char* op) {
  const long arg = std::strtol(op + 1, nullptr, 10);
  const int id = static_cast<int>(arg);
  const char* colon = std::strchr(op, ':');
  const long second = colon ? std::strtol(colon + 1, nullptr, 10) : 0;
  const unsigned char v = static_cast<unsigned char>(second);
  if (op[0] == 'P') {
    pools.emplace_back(static_cast<std::size_t>(arg), static_cast<std::size_t>(second));
    selected = pools.size() - 1;
    std::printf("%zu\n", selected);
    return true;
  }
  if (op[0] == 's') {
    selected = static_cast<std::size_t>(arg);
    std::printf("ok\n");
    return true;
  }
  BlockPool& p = pools.at(selected);
  switch (op[0]) {
    case 'a': std::printf("%d\n", p.allocate()); break;
    case 'n': std::printf("%zu\n", p.num_free()); break;
    case 'N': std::printf("%zu\n", p.num_blocks()); break;
    case 'B': std::printf("%zu\n", p.block_bytes()); break;
    case 'f': p.free(id); std::printf("ok\n"); break;
    case 'w': (void)p.data(id); fill(p, id, v); std::printf("ok\n"); break;
    case 'r': (void)p.data(id); std::printf("%d\n", holds(p, id, v) ? 1 : 0); break;
    case 'd': {
      const std::byte* at = p.data(id);
      std::printf("%td\n", at - p.data(0));
      break;
    }
    case '@': std::printf("%zu\n", address_index(p.data(id))); break;
    case 'm': {
      BlockPool moved(std::move(p));
      pools.push_back(std::move(moved));
      std::printf("%zu\n", pools.size() - 1);
      break;
    }
    case 'M': {
      BlockPool& target = pools.at(static_cast<std::size_t>(arg));
      const long long old_storage = static_cast<long long>(target.num_blocks() * target.block_bytes());
      const long long before = static_cast<long long>(heap_bytes());
      target = std::move(p);
      const long long released = before - static_cast<long long>(heap_bytes());
      std::printf(&target == &p || released >= old_storage ? "ok\n" : "kept\n");
      break;
    }
    case 'S': {
      BlockPool& alias = p;
      p = std::move(alias);
      std::printf("ok\n");
      break;
    }
    default: return false;
  }
  return true;
}

// Leak `bytes` on purpose, out of reach of every root LeakSanitizer scans.
__attribute__((noinline)) void leak_canary(std::size_t bytes) {
  void* volatile where = std::malloc(bytes);
  std::memset(where, 0x5C, bytes);
  where = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: %s CANARY_BYTES OP...\n", argv[0]);
    return 2;
  }
  const std::size_t canary = std::strtoul(argv[1], nullptr, 10);
  static char out_buffer[1 << 16];  // stdout's buffer, not on the heap: the heap is measured from here
  std::setvbuf(stdout, out_buffer, _IOFBF, sizeof out_buffer);
  const std::size_t heap_at_start = heap_bytes();
  for (int i = 2; i < argc; ++i) {
    try {
      if (!run(argv[i])) {
        std::printf("bad op %s\n", argv[i]);
        return 2;
      }
    } catch (const std::out_of_range&) {
      std::printf("range\n");
    } catch (const std::invalid_argument&) {
      std::printf("invalid\n");
    } catch (...) {
      std::printf("other\n");
    }
    std::fflush(stdout);  // an ASan report after this op still leaves the lines before it
  }
  pools.clear();  // every pool's destructor runs here: a double free is reported now
  pools.shrink_to_fit();
  addresses.clear();
  addresses.shrink_to_fit();
  std::printf("%lld\n", static_cast<long long>(heap_bytes()) - static_cast<long long>(heap_at_start));
  std::printf("END\n");
  std::fflush(stdout);
  leak_canary(canary);
  return 0;
}
