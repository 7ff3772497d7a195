// Injector: the FIFO queue through which threads outside a pool hand it jobs.
//
// Producers (any number, any threads) link nodes into an intrusive
// multi-producer queue in the style of Dmitry Vyukov's MPSC queue: one
// exchange on the tail, then a store of the predecessor's link; no lock, no
// allocation, FIFO in the order of the exchanges. Consumers are workers;
// they take turns through a try-lock (one flag), so the queue has one
// consumer at a time and nodes are never freed while another thread reads
// them (no ABA: the node's owner frees it only after a consumer handed it
// out).
//
// `pushed_` and `popped_` count nodes in and out. has_jobs() compares them:
// it is the variable the sleep protocol's final check reads, and the
// producer increments `pushed_` before it links the node, so a job that is
// half-linked already counts as queued.
#pragma once

#include <cstdint>

#include "sync.hpp"

namespace blz {

// Node must have a member `next` of type Sync::atomic<Node*>.
template <class Node, class Sync = StdSync>
class Injector {
public:
    Injector() {
        // relaxed: no other thread sees the queue before construction ends.
        stub_.next.store(nullptr, std::memory_order_relaxed);
        tail_.store(&stub_, std::memory_order_relaxed);
        head_ = &stub_;
    }

    Injector(const Injector &) = delete;
    Injector &operator=(const Injector &) = delete;

    // Any thread. Returns whether the queue looked empty before this push.
    bool push(Node *node) {
        // relaxed: `pushed_` is the injector's half of the store-buffering
        // pair in the sleep protocol, and the poster's seq-cst fence
        // (Sleep::new_shared_jobs) orders it; it is that fence, not this
        // increment, that the protocol relies on.
        uint64_t before = pushed_.fetch_add(1, std::memory_order_relaxed);
        bool was_empty = before == popped_.load(std::memory_order_relaxed);  // relaxed: a hint for the wake decision
        link(node);
        return was_empty;
    }

    // Any thread. Returns a node, or nullptr when the queue is empty, when a
    // producer is between its exchange and its link, or when another
    // consumer holds the turn (has_jobs() stays true in the last two cases,
    // so no worker goes to sleep on them).
    Node *pop() {
        if (!has_jobs()) return nullptr;
        // relaxed peek, then acquire: the previous consumer's writes to
        // head_ and popped_ (before its release below) are visible to us.
        if (consuming_.load(std::memory_order_relaxed) ||
            consuming_.exchange(true, std::memory_order_acquire)) {
            return nullptr;
        }
        Node *node = take();
        if (node != nullptr) {
            // relaxed store: only the consumer holding the turn writes popped_;
            // the turn orders consecutive consumers.
            popped_.store(popped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        }
        consuming_.store(false, std::memory_order_release);  // release: see the acquire above
        return node;
    }

    // Any thread. True while some pushed node has not been popped.
    // relaxed loads: in the sleep protocol this check follows a seq-cst
    // fence, which orders it against the producer's push and fence.
    bool has_jobs() const {
        return pushed_.load(std::memory_order_relaxed) != popped_.load(std::memory_order_relaxed);
    }

    // The number of nodes ever pushed.
    uint64_t pushed() const { return pushed_.load(std::memory_order_relaxed); }

private:
    void link(Node *node) {
        node->next.store(nullptr, std::memory_order_relaxed);  // relaxed: published by the exchange
        // acq_rel: release publishes the node's contents to the consumer;
        // acquire orders our store into prev->next after prev's own link.
        Node *prev = tail_.exchange(node, std::memory_order_acq_rel);
        // release: the consumer's acquire load of prev->next sees the node.
        prev->next.store(node, std::memory_order_release);
    }

    // The consumer holding the turn: Vyukov's pop. head_ is the oldest node
    // not yet handed out, or the stub.
    Node *take() {
        Node *head = head_;
        Node *next = head->next.load(std::memory_order_acquire);  // acquire: pairs with link()
        if (head == &stub_) {
            if (next == nullptr) return nullptr;
            head_ = next;
            head = next;
            next = next->next.load(std::memory_order_acquire);
        }
        if (next != nullptr) {
            head_ = next;
            return head;
        }
        // head is the last linked node; give it out only if no producer is
        // past its exchange, by putting the stub behind it.
        if (tail_.load(std::memory_order_acquire) != head) return nullptr;  // a link is in flight
        link(&stub_);
        next = head->next.load(std::memory_order_acquire);
        if (next != nullptr) {
            head_ = next;
            return head;
        }
        return nullptr;
    }

    alignas(kCacheLine) typename Sync::template atomic<Node *> tail_;
    typename Sync::template atomic<uint64_t> pushed_{0};
    alignas(kCacheLine) typename Sync::template atomic<uint64_t> popped_{0};
    Node *head_;  // the consumer holding the turn's alone
    typename Sync::template atomic<bool> consuming_{false};  // the turn: true while a consumer holds it
    Node stub_;
};

}  // namespace blz
