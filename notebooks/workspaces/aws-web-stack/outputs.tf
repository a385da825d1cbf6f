output "alb_dns_name" {
  description = "Public DNS name of the load balancer."
  value       = module.web.alb_dns_name
}

output "log_bucket" {
  description = "Bucket receiving the load balancer's access logs."
  value       = module.logs.bucket_name
}
