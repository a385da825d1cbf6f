# Our workspace: a firewall rule that admits the network team's VPC CIDR, read from
# their state (terraform_remote_state, a local backend here).
data "terraform_remote_state" "network" {
  backend = "local"
  config = {
    path = "../network/terraform.tfstate"
  }
}

resource "terraform_data" "firewall" {
  input = { rule = "allow-vpc-https", source = data.terraform_remote_state.network.outputs.cidr }
}

output "allowed_cidr" {
  value = data.terraform_remote_state.network.outputs.cidr
}
