# gang: a two-member distributed job placed all at once or not at all.
# Each member gets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT
# (and GPULAYER_-prefixed twins plus GPULAYER_GANG_PEERS), as
# torch.distributed expects. If one member fails, the server stops the other
# and places the whole gang again (at most 3 times).
#
#   gpulayer job run examples/gang.hcl
job "gang" {
  type = "batch"

  group "workers" {
    count = 2
    gang  = true

    task "train" {
      driver = "native"

      config {
        command = "/bin/sh"
        args = [
          "-c",
          "echo \"rank $RANK of $WORLD_SIZE (local $LOCAL_RANK), master $MASTER_ADDR:$MASTER_PORT, gpu $CUDA_VISIBLE_DEVICES\"; sleep 20",
        ]
      }

      resources {
        cpu    = 100
        memory = 64

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
