# The network team's workspace: the VPC and its CIDR, published as an output.
variable "cidr" {
  type    = string
  default = "10.20.0.0/16"
}

resource "terraform_data" "vpc" {
  input = { name = "orders-vpc", cidr = var.cidr }
}

output "cidr" {
  value = terraform_data.vpc.output.cidr
}
