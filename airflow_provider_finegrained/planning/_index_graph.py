"""Connected components and the order of a DAG over stage indices (0..n-1), for large plans.

Regions and forward groups are connected components; regions that wait on each other in a cycle
are strongly connected components. These work on plain lists of integers, not on a graph library's
objects: a 100,000-stage plan spends its time here, and lists of ints are several times cheaper
to build and to walk than dictionaries of names or graph objects.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")


def component_labels(n: int, pairs: Iterable[tuple[int, int]]) -> tuple[list[int], int]:
    """Join ``a`` and ``b`` for every pair; return each item's component and the number of components.

    Components are numbered by their first (lowest) item, so walking items in order meets
    component 0, then 1, and so on.
    """
    parent = list(range(n))
    for a, b in pairs:
        # Path halving keeps the trees flat without recursion.
        while parent[a] != a:
            parent[a] = a = parent[parent[a]]
        while parent[b] != b:
            parent[b] = b = parent[parent[b]]
        if a != b:
            parent[b] = a
    label = [-1] * n
    labels = [0] * n
    count = 0
    for i in range(n):
        root = i
        while parent[root] != root:
            root = parent[root]
        if label[root] < 0:
            label[root] = count
            count += 1
        labels[i] = label[root]
    return labels, count


def members_by_label(labels: Sequence[int], count: int, items: Sequence[T]) -> list[list[T]]:
    """Each component's members in item order (``items[i]`` stands for item i), indexed by component."""
    members: list[list[T]] = [[] for _ in range(count)]
    for item, label in zip(items, labels, strict=True):
        members[label].append(item)
    return members


def strongly_connected(successors: Sequence[Sequence[int]]) -> tuple[list[int], int]:
    """Tarjan's strongly connected components, iteratively; return each node's component and the count."""
    n = len(successors)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    component = [-1] * n
    stack: list[int] = []
    counter = 0
    count = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        path = [root]
        iterators = [iter(successors[root])]
        while path:
            v = path[-1]
            for w in iterators[-1]:
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    path.append(w)
                    iterators.append(iter(successors[w]))
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            else:
                path.pop()
                iterators.pop()
                if path and low[v] < low[path[-1]]:
                    low[path[-1]] = low[v]
                if low[v] == index[v]:
                    while True:
                        w = stack.pop()
                        on_stack[w] = False
                        component[w] = count
                        if w == v:
                            break
                    count += 1
    return component, count


def smallest_first_topological_order(successors: Sequence[Sequence[int]]) -> list[int] | None:
    """A topological order that always takes the lowest-numbered ready node; None on a cycle.

    Successors may repeat (parallel edges); each occurrence counts as one edge.
    """
    n = len(successors)
    indegree = [0] * n
    for targets in successors:
        for w in targets:
            indegree[w] += 1
    ready = [v for v in range(n) if indegree[v] == 0]  # ascending, so already a heap
    order: list[int] = []
    while ready:
        v = heapq.heappop(ready)
        order.append(v)
        for w in successors[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                heapq.heappush(ready, w)
    return order if len(order) == n else None


def is_acyclic(n: int, producers: Sequence[int], consumers: Sequence[int]) -> bool:
    """Whether the edges ``producers[k] -> consumers[k]`` over nodes 0..n-1 form no cycle (Kahn)."""
    if all(p < c for p, c in zip(producers, consumers, strict=True)):
        return True  # listed in topological order already, the usual case
    successors: list[list[int]] = [[] for _ in range(n)]
    indegree = [0] * n
    for p, c in zip(producers, consumers, strict=True):
        successors[p].append(c)
        indegree[c] += 1
    ready = [v for v in range(n) if indegree[v] == 0]
    seen = 0
    while ready:
        v = ready.pop()
        seen += 1
        for w in successors[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    return seen == n
