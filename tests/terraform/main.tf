# A terraform_data workspace for the plan-first tests: plans and applies offline.
# stage 1 is the applied baseline; stage 2 updates app, replaces cache (its
# triggers_replace changes), deletes old and creates new.
variable "db_password" {
  type      = string
  sensitive = true
}

variable "stage" {
  type    = number
  default = 1
}

locals {
  size = var.stage == 1 ? "small" : "large"
}

resource "terraform_data" "db" {
  input = var.db_password
}

resource "terraform_data" "app" {
  input = { size = local.size, name = "app" }
}

resource "terraform_data" "cache" {
  input            = "cache-1"
  triggers_replace = [local.size]
}

resource "terraform_data" "old" {
  count = var.stage == 1 ? 1 : 0
  input = "old"
}

resource "terraform_data" "new" {
  count = var.stage == 2 ? 1 : 0
  input = "fresh"
}

output "db_password" {
  value     = var.db_password
  sensitive = true
}

output "size" {
  value = local.size
}
