"""Part 3: queue-depth autoscaling decisions (README.md, "Part 3: autoscaling").

The decision function a Kubernetes HorizontalPodAutoscaler applies, with the
metric an LLM cluster cares about: requests queued or running per replica.
The cluster calls `decide` every few seconds with the total queue depth it
measured; the answer is how many replicas it should run. Pure arithmetic on
integers and one float tolerance, so every decision is exact.
"""

from __future__ import annotations


class Autoscaler:
    def __init__(self, target_per_replica: int, min_replicas: int, max_replicas: int,
                 cooldown_s: float, tolerance: float = 0.1):
        if not 1 <= min_replicas <= max_replicas:
            raise ValueError("need 1 <= min_replicas <= max_replicas")
        if target_per_replica < 1:
            raise ValueError("target_per_replica must be >= 1")
        self.target = int(target_per_replica)
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.cooldown_s = cooldown_s
        self.tolerance = tolerance
        self.last_change = float("-inf")   # time of the last decision that changed the count

    def decide(self, now: float, current: int, queue_depth: int) -> int:
        """The replica count to run from now on, given `current` replicas and
        `queue_depth` requests queued or running over all of them at time `now`
        (seconds, non-decreasing between calls)."""
        # BEGIN SOLUTION
        wanted = current * self.target
        if abs(queue_depth - wanted) <= self.tolerance * wanted:
            desired = current                       # inside the tolerance band: hold (hysteresis)
        else:
            desired = -(-queue_depth // self.target)  # ceil(queue_depth / target), in integers
        desired = max(self.min_replicas, min(self.max_replicas, desired))
        if desired < current and now - self.last_change < self.cooldown_s:
            desired = current                       # scale down only after the cooldown
        if desired != current:
            self.last_change = now
        return desired
        # STARTER
        # raise NotImplementedError("Autoscaler.decide: see README.md, section \"Part 3: autoscaling\"")
        # END SOLUTION
