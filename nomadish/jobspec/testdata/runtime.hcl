# Runtime interpolations survive parsing as text; var and local do not.
variable "rack" {
  default = "r7"
}

locals {
  kernel = "${attr.kernel.name}"
}

job "runtime" {
  constraint {
    attribute = local.kernel
    value     = "linux"
  }

  constraint {
    attribute = "${meta.rack}"
    value     = "${var.rack}"
  }

  constraint {
    attribute = "${ attr.unique.hostname }"
    operator  = "regexp"
    value     = "gpu-${var.rack}-[0-9]+"
  }

  group "g" {
    task "t" {
      driver = "native"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo ${NOMAD_ALLOC_ID} ${GPULAYER_ALLOC_INDEX} on ${node.unique.name} in ${var.rack}"]
        escaped = "$${var.rack} and $${attr.x}"
        env_ref = "${env.HOME}/data"
        heredoc = <<-EOT
          alloc ${NOMAD_ALLOC_ID}
          rack ${var.rack}
        EOT
      }

      env {
        DEVICE = "${device.ids}"
      }

      resources {
        device "nvidia/gpu" {
          constraint {
            attribute = "${device.attr.memory}"
            operator  = ">="
            value     = "40 GiB"
          }
        }
      }
    }
  }
}
