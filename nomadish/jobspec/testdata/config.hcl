# Driver config is free-form: nested values and nested blocks.
job "config" {
  type = "service"

  group "g" {
    task "t" {
      driver = "docker"

      config {
        image      = "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04"
        args       = ["nvidia-smi", "-L"]
        privileged = false
        shm_mb     = 64
        ratio      = 0.5
        big        = 1e30
        ports      = { http = 8080, grpc = 9090 }
        labels     = { "com.example/team" = "ml" }
        nested     = [[1, 2], { a = null, b = [] }]

        mount {
          type   = "bind"
          source = "/data"
          target = "/data"
        }

        mount {
          type   = "tmpfs"
          target = "/scratch"
        }

        logging {
          type = "json-file"
        }
      }
    }
  }
}
