provider "aws" {
  region = var.region
}
