# The orders service's queue stack. terraform_data resources stand in for real queues:
# they plan and apply offline, with no provider to download.

resource "terraform_data" "orders_queue" {
  input = {
    name               = "orders"
    visibility_timeout = 30
    max_receive_count  = 0
    dead_letter_queue  = ""
  }
}
