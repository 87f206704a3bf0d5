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
      // BEGIN SOLUTION
      : storage_(std::make_unique<std::byte[]>(num_blocks * block_bytes)),
        num_blocks_(num_blocks),
        block_bytes_(block_bytes),
        in_use_(num_blocks, false) {
    free_list_.reserve(num_blocks);
    for (std::size_t i = num_blocks; i > 0; --i) {
      free_list_.push_back(static_cast<int>(i - 1));  // pop_back() yields 0 first
    }
  }
  // STARTER
  // {
  //   (void)num_blocks; (void)block_bytes;  // TODO: README.md, Part 1
  // }
  // END SOLUTION

  // BEGIN SOLUTION
  ~BlockPool() = default;  // unique_ptr frees the storage; nothing else to do

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  BlockPool(BlockPool&& other) noexcept
      : storage_(std::move(other.storage_)),
        num_blocks_(std::exchange(other.num_blocks_, 0)),
        block_bytes_(std::exchange(other.block_bytes_, 0)),
        free_list_(std::move(other.free_list_)),
        in_use_(std::move(other.in_use_)) {
    other.free_list_.clear();  // a moved-from vector is "valid but unspecified": make it empty
    other.in_use_.clear();
  }

  BlockPool& operator=(BlockPool&& other) noexcept {
    if (this != &other) {
      storage_ = std::move(other.storage_);  // releases our old storage first
      num_blocks_ = std::exchange(other.num_blocks_, 0);
      block_bytes_ = std::exchange(other.block_bytes_, 0);
      free_list_ = std::move(other.free_list_);
      in_use_ = std::move(other.in_use_);
      other.free_list_.clear();
      other.in_use_.clear();
    }
    return *this;
  }
  // STARTER
  // // TODO: destructor, copy (deleted) and move (source left empty): README.md, Part 1
  // END SOLUTION

  // A free block id, or -1 when every block is in use.
  int allocate() {
    // BEGIN SOLUTION
    if (free_list_.empty()) {
      return -1;
    }
    const int id = free_list_.back();
    free_list_.pop_back();
    in_use_[static_cast<std::size_t>(id)] = true;
    return id;
    // STARTER
    // return -1;  // TODO: README.md, Part 1
    // END SOLUTION
  }

  // Give block `id` back. Throws std::out_of_range for an id outside
  // [0, num_blocks()) and std::invalid_argument for a block that is not in use
  // (a double free caught by the bookkeeping, before it corrupts the list).
  void free(int id) {
    // BEGIN SOLUTION
    if (id < 0 || static_cast<std::size_t>(id) >= num_blocks_) {
      throw std::out_of_range("BlockPool::free: block id " + std::to_string(id) + " is outside [0, " +
                              std::to_string(num_blocks_) + ")");
    }
    if (!in_use_[static_cast<std::size_t>(id)]) {
      throw std::invalid_argument("BlockPool::free: block " + std::to_string(id) + " is not in use (double free?)");
    }
    in_use_[static_cast<std::size_t>(id)] = false;
    free_list_.push_back(id);
    // STARTER
    // (void)id;  // TODO: README.md, Part 1
    // END SOLUTION
  }

  // The first byte of block `id` (block_bytes() bytes are usable from there).
  // Throws std::out_of_range for an id outside [0, num_blocks()): a pointer
  // outside the pool must never be handed out.
  std::byte* data(int id) {
    // BEGIN SOLUTION
    if (id < 0 || static_cast<std::size_t>(id) >= num_blocks_) {
      throw std::out_of_range("BlockPool::data: block id " + std::to_string(id) + " is out of range");
    }
    return storage_.get() + static_cast<std::size_t>(id) * block_bytes_;
    // STARTER
    // (void)id;
    // return nullptr;  // TODO: README.md, Part 1
    // END SOLUTION
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
