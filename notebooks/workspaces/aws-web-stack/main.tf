locals {
  tags = merge(var.tags, { environment = var.environment })
}

module "network" {
  source = "./modules/network"

  name     = "web-${var.environment}"
  vpc_cidr = var.vpc_cidr
  tags     = local.tags
}

module "web" {
  source = "./modules/web"

  name               = "web-${var.environment}"
  vpc_id             = module.network.vpc_id
  public_subnet_ids  = module.network.public_subnet_ids
  private_subnet_ids = module.network.private_subnet_ids
  instance_type      = var.instance_type
  tags               = local.tags
}

module "logs" {
  source = "./modules/logs"

  name = "web-${var.environment}"
}

module "alerts" {
  source = "terraform-aws-modules/sns/aws"

  name = "web-${var.environment}-alerts"
  tags = local.tags
}

resource "random_id" "suffix" {
  byte_length = 4
}
