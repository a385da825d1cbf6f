variable "name" {
  description = "Name prefix of the web tier."
  type        = string
}

variable "vpc_id" {
  description = "VPC to deploy into."
  type        = string
}

variable "vpc_cidr_hint" {
  description = "CIDR the load balancer may reach (the VPC's)."
  type        = string
  default     = "10.40.0.0/16"
}

variable "public_subnet_ids" {
  description = "Subnets of the load balancer."
  type        = list(string)
}

variable "private_subnet_ids" {
  description = "Subnets of the instances."
  type        = list(string)
}

variable "instance_type" {
  description = "EC2 instance type."
  type        = string
}

variable "tags" {
  description = "Tags for every taggable resource."
  type        = map(string)
  default     = {}
}
