# A pool of one-GPU hosts made on demand by the docker provider.
node_pool "gpu-a100" {
  description = "A100 hosts on demand"

  meta {
    team = "ml"
    env  = "dev"
  }

  scaling {
    provider   = "docker"
    min        = 0
    max        = 4
    cooldown   = "30s"
    idle_after = "2m"

    config {
      image = "gpulayer:dev"
    }

    shape {
      node_class    = "a100"
      gpu_model     = "NVIDIA A100-SXM4-80GB"
      gpu_count     = 1
      gpu_memory_mb = 81920
      memory_model  = "discrete"
      availability  = "continuous"
    }

    idle {
      no_allocations = true
      gpu_util_below = 5
      gpu_util_for   = "10m"
    }
  }
}
