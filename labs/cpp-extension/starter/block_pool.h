// Part 1: RAII and ownership. A fixed pool of equal-sized memory blocks, the
// C++ twin of the paged KV cache's block pool: one big allocation, handed out
// block by block through a free list of block ids.
//
// Ownership rules (the "rule of five"):
//   * the pool OWNS its storage through std::unique_ptr<std::byte[]>, so the
//     memory is released exactly once, when the owning pool dies;
//   * copying is deleted: two pools owning one buffer would free it twice;
//   * moving transfers the storage and the bookkeeping and leaves the source
//     EMPTY (num_blocks() == 0, num_free() == 0, allocate() == -1), a valid
//     object that owns nothing.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

class BlockPool {
 public:
  // num_blocks blocks of block_bytes bytes each; all free. allocate() hands
  // out 0, 1, 2, ... first; freed ids are reused last-in first-out.
  BlockPool(std::size_t num_blocks, std::size_t block_bytes)
  {
    (void)num_blocks; (void)block_bytes;  // TODO: README.md, Part 1
  }

  // TODO: destructor, copy (deleted) and move (source left empty): README.md, Part 1

  // A free block id, or -1 when every block is in use.
  int allocate() {
    return -1;  // TODO: README.md, Part 1
  }

  // Give block `id` back. Throws std::out_of_range for an id outside
  // [0, num_blocks()) and std::invalid_argument for a block that is not in use
  // (a double free caught by the bookkeeping, before it corrupts the list).
  void free(int id) {
    (void)id;  // TODO: README.md, Part 1
  }

  // The first byte of block `id` (block_bytes() bytes are usable from there).
  // Throws std::out_of_range for an id outside [0, num_blocks()): a pointer
  // outside the pool must never be handed out.
  std::byte* data(int id) {
    (void)id;
    return nullptr;  // TODO: README.md, Part 1
  }

  std::size_t num_blocks() const { return num_blocks_; }
  std::size_t block_bytes() const { return block_bytes_; }
  std::size_t num_free() const { return free_list_.size(); }

 private:
  std::unique_ptr<std::byte[]> storage_;
  std::size_t num_blocks_ = 0;
  std::size_t block_bytes_ = 0;
  std::vector<int> free_list_;  // ids of free blocks; back() is handed out next
  std::vector<bool> in_use_;    // in_use_[id]: allocated and not yet freed
};
