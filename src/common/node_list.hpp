// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A doubly linked list whose nodes move between lists by relinking, inline.
//
// The matcher keeps posted receives in lists and moves each one between a
// list of spare nodes and a posted list twice per message (post, match).
// std::list does each move through libstdc++'s out-of-line node transfer
// (about 45 instructions with its checks and size counts, a fifth of the
// receive path of a small message); here a move is four pointer stores.
// Only what the matcher uses: iteration, push_back, back, splice of one
// node, and size (a walk: for tests and diagnostics).
#include <cstddef>
#include <iterator>

namespace weft {

template <class T>
class node_list {
  struct link {
    link* prev;
    link* next;
  };
  struct node : link {
    T value;
  };

public:
  class iterator {
  public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = T*;
    using reference = T&;
    iterator() = default;
    T& operator*() const noexcept { return static_cast<node*>(l_)->value; }
    T* operator->() const noexcept { return &static_cast<node*>(l_)->value; }
    iterator& operator++() noexcept {
      l_ = l_->next;
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator t = *this;
      l_ = l_->next;
      return t;
    }
    iterator& operator--() noexcept {
      l_ = l_->prev;
      return *this;
    }
    bool operator==(const iterator& o) const noexcept { return l_ == o.l_; }

  private:
    friend class node_list;
    explicit iterator(link* l) noexcept : l_(l) {}
    link* l_ = nullptr;
  };

  node_list() noexcept { end_.prev = end_.next = &end_; }
  node_list(const node_list&) = delete;
  node_list& operator=(const node_list&) = delete;
  ~node_list() {
    for (link* l = end_.next; l != &end_;) {
      link* next = l->next;
      delete static_cast<node*>(l);
      l = next;
    }
  }

  iterator begin() noexcept { return iterator(end_.next); }
  iterator end() noexcept { return iterator(&end_); }
  bool empty() const noexcept { return end_.next == &end_; }
  T& back() noexcept { return static_cast<node*>(end_.prev)->value; }
  size_t size() const noexcept {
    size_t n = 0;
    for (const link* l = end_.next; l != &end_; l = l->next) ++n;
    return n;
  }
  // A new node at the tail (may throw std::bad_alloc).
  void push_back(const T& v) {
    node* n = new node;
    n->value = v;
    hook(n, &end_);
  }
  // Moves the node at `it`, a node of `from` (possibly this list), to
  // before `pos`.
  void splice(iterator pos, node_list& /*from*/, iterator it) noexcept {
    link* l = it.l_;
    if (l == pos.l_) return;
    l->prev->next = l->next;
    l->next->prev = l->prev;
    hook(l, pos.l_);
  }

private:
  static void hook(link* l, link* before) noexcept {
    l->next = before;
    l->prev = before->prev;
    before->prev->next = l;
    before->prev = l;
  }
  link end_;
};

}  // namespace weft
