job "model" {
  type = "service"

  update {
    max_parallel = 2
    canary       = 1
  }

  group "serve" {
    count = 3

    update {
      max_parallel      = 1
      health_check      = "task_states"
      min_healthy_time  = "2m"
      healthy_deadline  = "15m"
      progress_deadline = "30m"
      auto_revert       = true
      auto_promote      = true
      canary            = 1
      max_unavailable   = 0
    }

    task "server" {
      driver = "native"
      config {
        command = "/usr/local/bin/serve"
      }
      resources {
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
