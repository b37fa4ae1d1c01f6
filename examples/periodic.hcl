# periodic: a batch job launched by cron. The job itself is a parent: it is
# never placed; each cron time launches a child nightly/periodic-<unix>.
#
#   gpulayer job run examples/periodic.hcl
#   gpulayer job periodic force nightly   # launch a child now
#   gpulayer job status nightly           # the schedule and the children
#
# More in website/docs/periodic.md.
job "nightly" {
  type = "batch"

  periodic {
    crons            = ["0 3 * * *"] # 03:00 every day
    time_zone        = "UTC"
    prohibit_overlap = true # skip a time while the last child still runs
  }

  group "report" {
    task "main" {
      driver = "native"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"report by $GPULAYER_JOB_NAME on $CUDA_VISIBLE_DEVICES\""]
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
