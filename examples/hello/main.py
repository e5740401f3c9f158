"""A tiny Ray program: fan out squares over the cluster and sum them."""

import os

import ray

ray.init()


@ray.remote
def square(x: int) -> int:
    return x * x


total = sum(ray.get([square.remote(i) for i in range(10)]))
print(f"sum of squares: {total}")
print(f"allocated: NUM_GPUS={os.environ.get('NUM_GPUS')} NUM_REPLICAS={os.environ.get('NUM_REPLICAS')}")
ray.shutdown()
