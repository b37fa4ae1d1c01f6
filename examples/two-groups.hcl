# two-groups: a batch job with two task groups. "prepare" needs no GPU and
# writes a line; "train" takes one GPU and pretends to train for two seconds.
#
#   gpulayer job run -var steps=5 examples/two-groups.hcl
variable "steps" {
  type        = number
  default     = 3
  description = "How many fake training steps the train task runs."
}

locals {
  shell = "/bin/sh"
}

job "two-groups" {
  type        = "batch"
  datacenters = ["dc1"]

  meta {
    owner = "examples"
  }

  group "prepare" {
    task "fetch" {
      driver = "native"

      config {
        command = local.shell
        args    = ["-c", "echo \"preparing data on $(uname -n)\"; sleep 1; echo prepared"]
      }

      resources {
        cpu    = 100
        memory = 32
      }
    }
  }

  group "train" {
    restart {
      attempts = 1
      delay    = "2s"
      interval = "1m"
      mode     = "fail"
    }

    task "train" {
      driver = "native"

      config {
        command = local.shell
        args = [
          "-c",
          "echo \"gpus: $CUDA_VISIBLE_DEVICES\"; i=1; while [ $i -le ${var.steps} ]; do echo \"step $i/${var.steps}\"; sleep 0.5; i=$((i+1)); done; echo done",
        ]
      }

      env {
        STEPS = var.steps
      }

      resources {
        cpu    = 200
        memory = 128

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
