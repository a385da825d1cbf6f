import './base.css';
import './console.css';
import './plan.css';
import './form.css';
import './approvals.css';
