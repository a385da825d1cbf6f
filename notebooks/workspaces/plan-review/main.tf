# The orders stack, modelled with terraform_data so it plans and applies offline.
# terraform.tfstate holds release 1.4.2 as applied; this configuration is release 1.5.0:
# the API is updated, the cache moves to redis 7 (a replacement), the legacy worker goes
# and a queue comes in.
locals {
  cache_engine = "redis-7"
}

resource "terraform_data" "database" {
  input = { engine = "postgres-16", password = var.db_password }
}

resource "terraform_data" "api" {
  input = { version = var.api_version, replicas = 3 }
}

resource "terraform_data" "cache" {
  input            = local.cache_engine
  triggers_replace = [local.cache_engine]
}

resource "terraform_data" "queue" {
  input = { name = "orders-events", retention_days = 7 }
}

output "api_version" {
  value = terraform_data.api.output.version
}

output "db_password" {
  value     = var.db_password
  sensitive = true
}
