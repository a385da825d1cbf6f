variable "name" {
  description = "Name prefix of the bucket."
  type        = string
}
