# Every block and attribute the parser knows, as in the jobspec reference.
variable "gpus" {
  type    = number
  default = 1
}

locals {
  image = "x"
}

job "hello-gpu" {
  type        = "batch"
  priority    = 70
  namespace   = "research"
  datacenters = ["dc1", "dc2"]

  meta {
    owner = "me"
    image = local.image
  }

  constraint {
    attribute = "${attr.kernel.name}"
    operator  = "="
    value     = "linux"
  }

  constraint {
    attribute = "${node.class}"
    value     = "gpu"
  }

  affinity {
    attribute = "${meta.rack}"
    operator  = "!="
    value     = "r1"
    weight    = -30
  }

  group "train" {
    count = 2

    meta = {
      stage = "train"
    }

    restart {
      attempts = 2
      delay    = "5s"
      interval = "1m"
      mode     = "fail"
    }

    constraint {
      attribute = "${attr.os.name}"
      operator  = "regexp"
      value     = "^(debian|ubuntu)$"
    }

    affinity {
      attribute = "${node.datacenter}"
      value     = "dc1"
    }

    task "main" {
      driver       = "native"
      kill_timeout = "10s"
      kill_signal  = "SIGINT"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo hi"]
      }

      env {
        FOO   = "bar"
        GPUS  = var.gpus
        DEBUG = true
      }

      meta {
        role = "leader"
      }

      constraint {
        attribute = "${attr.driver.native}"
        value     = "1"
      }

      resources {
        cpu    = 500
        memory = 256

        device "nvidia/gpu" {
          count = var.gpus

          constraint {
            attribute = "${device.attr.memory}"
            operator  = ">="
            value     = "40 GiB"
          }

          affinity {
            attribute = "${device.model}"
            value     = "H100"
            weight    = 50
          }
        }

        device "nvidia/gpu/H100" {}
      }
    }

    task "sidecar" {
      driver = "docker"

      config = {
        image = "busybox:1.36"
      }
    }
  }
}
