# Variables, locals and functions are evaluated at parse time.
variable "name" {
  type        = string
  default     = "trainer"
  description = "Base name of the job's tasks."
}

variable "gpus" {
  type    = number
  default = 2
}

variable "dcs" {
  type    = list(string)
  default = ["dc1"]
}

variable "debug" {
  type    = bool
  default = false
}

locals {
  prefix = upper(var.name)
  label  = format("%s-%d", local.prefix, var.gpus)
}

locals {
  all_dcs = concat(var.dcs, ["dc9"])
  cpus    = max(100, var.gpus * 250)
}

job "vars" {
  datacenters = local.all_dcs

  meta {
    label   = local.label
    joined  = join(",", local.all_dcs)
    lowered = lower(local.prefix)
    debug   = var.debug
    first   = try(var.dcs[0], "none")
  }

  group "g" {
    count = min(3, var.gpus)

    task "t" {
      driver = "native"

      config {
        command = "/bin/echo"
        args    = [for dc in local.all_dcs : "dc=${dc}"]
      }

      resources {
        cpu    = local.cpus
        memory = var.gpus * 1024

        device "gpu" {
          count = var.gpus
        }
      }
    }
  }
}
