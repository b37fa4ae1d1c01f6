job "minimal" {
  group "g" {
    task "t" {
      driver = "native"
    }
  }
}
