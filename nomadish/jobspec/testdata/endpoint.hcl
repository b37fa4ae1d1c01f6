job "serve" {
  type = "service"
  group "llm" {
    count = 3
    network {
      port "http" {}
      port "metrics" {}
    }
    endpoint {
      name        = "llm-70b"
      port        = 9000
      model       = "llama-3-70b"
      revision    = "r7"
      policy      = "least_outstanding"
      models_path = "/openai/v1/models"
      member_port = "http"
    }
    task "server" {
      driver = "native"
      config {
        command = "/bin/sleep"
        args    = ["1000"]
      }
    }
  }
}
