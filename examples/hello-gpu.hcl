# hello-gpu: the smallest GPU job. It asks for one NVIDIA GPU, prints which
# device the client gave it, and exits 0.
#
#   gpulayer job run examples/hello-gpu.hcl
job "hello-gpu" {
  type = "batch"

  group "hello" {
    count = 1

    task "main" {
      driver = "native"

      config {
        command = "/bin/sh"
        args = [
          "-c",
          "echo \"gpus: $CUDA_VISIBLE_DEVICES\"; echo \"nvidia: $NVIDIA_VISIBLE_DEVICES\"; exit 0",
        ]
      }

      resources {
        cpu    = 100 # MHz
        memory = 64  # MiB

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
