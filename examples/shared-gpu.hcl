# shared-gpu: three small inference servers sharing GPUs by memory. Each
# asks for 4 GiB of one GPU's memory instead of a whole GPU; the scheduler
# puts several on one GPU while their shares fit its memory, and never puts
# a share on a GPU another allocation holds whole. The task's environment
# says its share in GPULAYER_GPU_MEMORY_MB. It opts in to opportunistic
# nodes (spare desktops) as well as continuous ones.
#
#   gpulayer job run examples/shared-gpu.hcl
job "shared-gpu" {
  type         = "service"
  priority     = 60
  availability = "opportunistic"

  group "infer" {
    count = 3

    task "serve" {
      driver = "native"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"share ${GPULAYER_GPU_MEMORY_MB} MiB of $CUDA_VISIBLE_DEVICES\"; sleep 3600"]
      }

      resources {
        cpu    = 100
        memory = 128

        device "nvidia/gpu" {
          memory = "4 GiB"
        }
      }
    }
  }
}
