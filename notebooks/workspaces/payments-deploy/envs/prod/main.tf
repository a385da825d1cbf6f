terraform {
  required_version = ">= 1.6.0"

  backend "s3" {
    bucket         = "acme-terraform-state"
    key            = "payments-api/prod/terraform.tfstate"
    region         = "eu-west-1"
    dynamodb_table = "acme-terraform-locks"
    encrypt        = true
  }
}

module "payments_api" {
  source = "../../modules/ecs-service"

  name          = "payments-api"
  environment   = "prod"
  image_tag     = var.image_tag
  desired_count = 6
}

variable "image_tag" {
  description = "Container image tag to deploy."
  type        = string
}
