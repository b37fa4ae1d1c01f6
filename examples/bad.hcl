# bad.hcl: a jobspec with a realistic mistake, for trying out error messages.
# What is wrong: memory is given as the word "lots" instead of a number of
# MiB, so `gpulayer job run examples/bad.hcl` fails with
#   examples/bad.hcl:20:18: Incorrect attribute value type: Inappropriate value
#   for attribute "memory": a number is required.
job "bad" {
  type = "batch"

  group "oops" {
    task "main" {
      driver = "native"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo this never runs"]
      }

      resources {
        cpu    = 100
        memory = "lots"
      }
    }
  }
}
